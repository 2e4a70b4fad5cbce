git init -q -b main .
printf '# Greeter\n\nHelo from the greeter project.\nRun ./greet to say Helo.\n' > README.md
git add README.md && git commit -q -m "Add README"
