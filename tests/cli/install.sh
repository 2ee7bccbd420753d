#!/bin/bash
# An install is relocatable: installed under a temporary prefix and then
# moved, its kernbench.pc still points at itself, every example in
# examples/ builds with pkg-config against it and runs (plug-ins through the
# installed kernbench, host programs finding libkernbench.so by rpath,
# without LD_LIBRARY_PATH).
# usage: install.sh KERNBENCH_BINARY SOURCE_DIR
set -u
KB=$1
SRC=$2
if [ "${KB_SANITIZE:-OFF}" = ON ]; then
    echo "install.sh: skipped: a sanitized library needs sanitized clients"
    exit 77
fi
. "$SRC/tests/support/cli.bash"

cmake --install "$(dirname "$KB")" --prefix "$tmp/first" > "$tmp/log" 2>&1
check "cmake --install: $(tail -3 "$tmp/log")" $?
mv "$tmp/first" "$tmp/moved"
pc=$(find "$tmp/moved" -name kernbench.pc)
[ -n "$pc" ]; check "kernbench.pc is installed" $?
grep -q '^prefix=${pcfiledir}/' "$pc"; check "kernbench.pc is relative to itself" $?
export PKG_CONFIG_PATH=$(dirname "$pc")
case "$(pkg-config --cflags kernbench)" in
*"$tmp/moved"*) check "cflags point into the moved prefix" 0 ;;
*) check "cflags point into the moved prefix: $(pkg-config --cflags kernbench)" 1 ;;
esac
unset LD_LIBRARY_PATH
kb="$tmp/moved/bin/kernbench"
n=0
cd "$tmp"
for c in "$SRC"/examples/*.c "$SRC"/examples/*/*.c; do
    name=$(basename "$c" .c)
    n=$((n + 1))
    if grep -q "KB_BENCH_PLUGIN const" "$c"; then
        cc -O2 -shared -fPIC $(pkg-config --cflags kernbench) "$c" -o "$name.so" 2> "$tmp/err"
        check "plug-in $name builds: $(cat "$tmp/err")" $?
        "$kb" run --bench "./$name.so" > "$tmp/out" 2>&1
        check "plug-in $name runs on the installed kernbench: $(tail -3 "$tmp/out")" $?
    else
        cc -O2 "$c" $(pkg-config --cflags --libs kernbench) -o "$name" 2> "$tmp/err"
        check "host program $name builds: $(cat "$tmp/err")" $?
        "./$name" > "$tmp/out" 2>&1
        check "host program $name runs, finding the library by rpath: $(tail -3 "$tmp/out")" $?
    fi
done
[ $n -ge 5 ]; check "every example was tried ($n)" $?
exit $fail
