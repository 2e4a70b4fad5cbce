[ -f sorted.txt ] && [ "$(cat sorted.txt)" = "$(printf '%s\n' Ada Bea Ines Lin Maya Omar)" ]
