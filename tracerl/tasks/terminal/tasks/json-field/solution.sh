python3 -c "import json; print(next(u['email'] for u in json.load(open('users.json')) if u['name'] == 'Ada Lovelace'))" > email.txt
