# Test servers for the FTP and S3 adapters, sourced by .ci/run (bash):
# Debian's pure-ftpd with one virtual user, and versitygw on a local
# folder. Each is started on its own line, its PID kept; stop_test_servers
# stops them (.ci/run traps it at exit). The tests find them through
# SLUICE_TEST_FTP* and SLUICE_TEST_S3* (and fail, under SLUICE_CI, when
# these are missing).

# The versitygw release the tests are written against; its build takes
# about two minutes, so the binary is kept in .cache/bin between runs.
VERSITYGW_VERSION=v1.8.0

install_test_servers() {
	if ! command -v pure-ftpd >/dev/null 2>&1 || ! command -v pure-pw >/dev/null 2>&1; then
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq pure-ftpd openssl >/dev/null
	fi
	local gw=.cache/bin/versitygw
	if [ ! -x "$gw" ] || [ "$(cat .cache/bin/versitygw.version 2>/dev/null)" != "$VERSITYGW_VERSION" ]; then
		mkdir -p .cache/bin
		GOBIN="$PWD/.cache/bin" go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
		echo "$VERSITYGW_VERSION" >.cache/bin/versitygw.version
	fi
}

# wait_port HOST PORT: until something listens (at most 30 s).
wait_port() {
	for _ in $(seq 300); do
		if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "nothing listens on $1:$2" >&2
	return 1
}

start_test_servers() {
	servers_dir=$(mktemp -d /tmp/sluice-servers.XXXXXX)
	mkdir -p "$servers_dir/ftp-home" "$servers_dir/s3"

	# pure-ftpd without a config file: one virtual user in a puredb. The
	# hash is made by openssl (pure-pw useradd's take ~2 s per login).
	local ftp_pass s3_access s3_secret
	ftp_pass=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
	s3_access=sluice$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
	s3_secret=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
	printf 'sluice:%s:%d:%d::%s/./::::::::::::\n' "$(openssl passwd -6 "$ftp_pass")" "$(id -u nobody)" "$(id -g nobody)" \
		"$servers_dir/ftp-home" >"$servers_dir/pureftpd.passwd"
	chown nobody:"$(id -g nobody)" "$servers_dir/ftp-home"
	pure-pw mkdb "$servers_dir/pureftpd.pdb" -f "$servers_dir/pureftpd.passwd"
	pure-ftpd -S 127.0.0.1,2121 -4 -l "puredb:$servers_dir/pureftpd.pdb" -E -A -H -p 30000:30049 -P 127.0.0.1 -c 50 -C 50 &
	ftp_pid=$!
	wait_port 127.0.0.1 2121

	# Its request log goes to a file (it logs every request).
	"${VERSITYGW:-.cache/bin/versitygw}" --port 127.0.0.1:7070 --access "$s3_access" --secret "$s3_secret" posix "$servers_dir/s3" \
		>"$servers_dir/versitygw.log" 2>&1 &
	s3_pid=$!
	wait_port 127.0.0.1 7070

	export SLUICE_TEST_FTP=ftp://sluice@127.0.0.1:2121 SLUICE_TEST_FTP_PASSWORD=$ftp_pass
	export SLUICE_TEST_S3=http://127.0.0.1:7070 SLUICE_TEST_S3_ACCESS_KEY=$s3_access SLUICE_TEST_S3_SECRET_KEY=$s3_secret
}

stop_test_servers() {
	[ -n "${ftp_pid:-}" ] && kill "$ftp_pid" 2>/dev/null && wait "$ftp_pid" 2>/dev/null
	[ -n "${s3_pid:-}" ] && kill "$s3_pid" 2>/dev/null && wait "$s3_pid" 2>/dev/null
	[ -n "${servers_dir:-}" ] && rm -rf "$servers_dir"
	return 0
}
