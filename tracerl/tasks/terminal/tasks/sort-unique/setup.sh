printf '%s\n' Maya Ines Omar Ada Maya Lin Omar Ada Bea Lin > names.txt
