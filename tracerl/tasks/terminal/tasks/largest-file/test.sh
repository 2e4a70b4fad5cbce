answer="$(tr -d '[:space:]' < answer.txt 2>/dev/null)"
[ "${answer#./}" = "data/img/raw/shot-7.bin" ]
