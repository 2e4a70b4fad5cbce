grep -c ERROR app.log > errors.txt
