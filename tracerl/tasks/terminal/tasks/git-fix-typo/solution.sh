sed -i 's/Helo/Hello/g' README.md
git commit -q -am "Fix typo"
