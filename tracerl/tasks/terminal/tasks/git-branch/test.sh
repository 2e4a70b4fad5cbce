[ "$(git rev-list --count main)" -eq 1 ] || exit 1                  # main unchanged
[ "$(git rev-list --count feature)" -eq 2 ] || exit 1
[ "$(git show feature:notes.txt)" = "todo" ] || exit 1
[ "$(git merge-base main feature)" = "$(git rev-parse main)" ]
