[ -z "$(find photos -name '*.jpeg')" ] || exit 1
for name in beach sunset "old town" harbour; do
  [ "$(cat "photos/$name.jpg" 2>/dev/null)" = "$name" ] || exit 1
done
[ "$(cat photos/notes.txt)" = "keep me" ] && [ "$(ls photos | wc -l)" -eq 5 ]
