cat > users.json <<'JSON'
[{"name": "Grace Hopper", "email": "grace@navy.example"},
 {"name": "Ada Lovelace", "email": "ada@engine.example"},
 {"name": "Alan Turing", "email": "alan@bletchley.example"}]
JSON
