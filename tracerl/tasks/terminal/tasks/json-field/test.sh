[ "$(tr -d '[:space:]' < email.txt 2>/dev/null)" = "ada@engine.example" ]
