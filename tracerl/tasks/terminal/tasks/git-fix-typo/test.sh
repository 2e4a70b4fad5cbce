git diff --quiet HEAD || exit 1                                   # everything committed
[ "$(git log -1 --format=%s)" = "Fix typo" ] || exit 1
[ "$(git rev-list --count HEAD)" -eq 2 ] || exit 1
! grep -q Helo README.md && [ "$(grep -c Hello README.md)" -eq 2 ]
