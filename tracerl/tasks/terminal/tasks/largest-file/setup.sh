mkdir -p data/logs data/img/raw data/tmp
head -c 1200 /dev/zero > data/logs/a.log
head -c 9000 /dev/zero > data/img/raw/shot-7.bin
head -c 8999 /dev/zero > data/img/cover.png
head -c 300 /dev/zero > data/tmp/x
