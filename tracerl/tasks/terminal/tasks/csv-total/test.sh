[ -f total.txt ] && [ "$(tr -d '[:space:]' < total.txt)" = "800" ]
