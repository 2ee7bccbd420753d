# Shared by command-line tests that report each failed check and go on:
# a scratch directory $tmp (removed at exit), $fail (0 until a check fails)
# and check DESCRIPTION STATUS (a nonzero STATUS prints FAIL and sets fail).
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # description, condition status
    if [ "$2" -ne 0 ]; then
        echo "FAIL: $1"
        fail=1
    fi
}
