git init -q -b main .
echo "print('hi')" > app.py
git add app.py && git commit -q -m "First commit"
