git checkout -q -b feature
echo todo > notes.txt
git add notes.txt && git commit -q -m "Add notes"
git checkout -q main
