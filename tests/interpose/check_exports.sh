#!/bin/bash
# check_exports.sh LIBRECAP MAPFILE - the shim exports exactly the names of
# its version script (every other exported symbol would interpose on the
# host program) and needs nothing but glibc and libdl.
set -eu
lib=$1 map=$2
expected=$(sed -n 's/^ *\([A-Za-z_][A-Za-z0-9_]*\);$/\1/p' "$map" | sort)
actual=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBRVi]$/ {print $3}' | sed 's/@.*//' | sort)
leaked=$(comm -23 <(printf '%s\n' "$actual") <(printf '%s\n' "$expected"))
missing=$(comm -13 <(printf '%s\n' "$actual") <(printf '%s\n' "$expected"))
status=0
if [ -n "$leaked" ]; then echo "leaked symbols:"; echo "$leaked"; status=1; fi
if [ -n "$missing" ]; then echo "missing exports:"; echo "$missing"; status=1; fi
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for n in $needed; do
  case "$n" in
    libc.so.6|libdl.so.2|ld-linux*|libasan.so*|libubsan.so*|libtsan.so*) ;;
    *) echo "unexpected dependency: $n"; status=1 ;;
  esac
done
[ $status -eq 0 ] && echo "exports: $(printf '%s\n' "$actual" | wc -l) symbols, all in the version script; needs: $(echo $needed)"
exit $status
