for i in $(seq 1 40); do
  case $((i % 7)) in
    0|3) echo "2026-11-02 10:$((i % 60)):00 ERROR request $i failed: timeout" ;;
    5) echo "2026-11-02 10:$((i % 60)):00 WARN request $i slow" ;;
    *) echo "2026-11-02 10:$((i % 60)):00 INFO request $i ok" ;;
  esac
done > app.log
