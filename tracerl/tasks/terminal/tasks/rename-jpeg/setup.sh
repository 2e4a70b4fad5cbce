mkdir -p photos
for name in beach sunset "old town" harbour; do echo "$name" > "photos/$name.jpeg"; done
echo "keep me" > photos/notes.txt
