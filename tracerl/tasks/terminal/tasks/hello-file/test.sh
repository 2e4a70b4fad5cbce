# exactly one line, exactly the text
[ -f hello.txt ] && [ "$(cat hello.txt)" = "Hello, world!" ] && [ "$(wc -l < hello.txt)" -le 1 ]
