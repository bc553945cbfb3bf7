# private-ns.sh -- sourced by test scripts that need a small full file system: sets
# ns to the command that runs one in a private mount namespace ("unshare -m" as root,
# "unshare -rm" as a user where user namespaces are allowed), or "" where none can be
# had (the caller then says it skipped that case).
ns=""
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
	ns="unshare -m"
elif unshare -rm true 2>/dev/null; then
	ns="unshare -rm"
fi
