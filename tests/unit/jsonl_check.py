#!/usr/bin/env python3
"""jsonl_check.py FILE [LINES] - checks that FILE is valid JSON Lines as recap
writes them: UTF-8, one object per line, "event" first and "pid" second,
every line newline-terminated. With LINES, also checks the line count.
Prints one diagnostic and exits 1 on the first problem."""
import json
import sys


def main():
    path = sys.argv[1]
    want = int(sys.argv[2]) if len(sys.argv) > 2 else None
    data = open(path, 'rb').read()
    if data and not data.endswith(b'\n'):
        print(f'{path}: last line not terminated')
        return 1
    lines = data.split(b'\n')[:-1] if data else []
    for no, raw in enumerate(lines, 1):
        try:
            text = raw.decode('utf-8', errors='strict')
            obj = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            print(f'{path}:{no}: {e}: {raw[:200]!r}')
            return 1
        keys = list(obj) if isinstance(obj, dict) else []
        if keys[:2] != ['event', 'pid'] or not isinstance(obj['pid'], int):
            print(f'{path}:{no}: expected "event" then "pid" first: {text[:200]}')
            return 1
    if want is not None and len(lines) != want:
        print(f'{path}: {len(lines)} lines, expected {want}')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
