package ftp_test

import (
	"bytes"
	"fmt"
	"net/url"
	"path"
	"testing"
	"time"

	jftp "github.com/jlaffaye/ftp"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/adapters/ftp"
	"github.com/sluicehq/sluice/adapters/remote"
	"github.com/sluicehq/sluice/adapters/remote/remotetest"
	"github.com/sluicehq/sluice/engine"
)

// TestSuiteRealServer runs the suite against a real FTP server (Debian's
// pure-ftpd in CI): SLUICE_TEST_FTP is ftp://USER@HOST:PORT, and
// SLUICE_TEST_FTP_PASSWORD the user's password. Every test works in a
// folder of its own.
func TestSuiteRealServer(t *testing.T) {
	env := remotetest.RealServer(t, "an FTP server", "SLUICE_TEST_FTP", "SLUICE_TEST_FTP_PASSWORD")
	u, err := url.Parse(env[0])
	require.NoError(t, err)
	remotetest.SetSecret(t, "SLUICE_TEST_FTP_PASSWORD", env[1])
	remotetest.Run(t, func(t *testing.T) *remotetest.Fixture {
		c := login(t, u.Host, u.User.Username(), env[1])
		dir := fmt.Sprintf("t%d", time.Now().UnixNano())
		require.NoError(t, c.MakeDir(dir))
		return &remotetest.Fixture{
			Kind: engine.SourceFTP,
			Config: config(t, ftp.Config{URL: "ftp://" + u.User.Username() + "@" + u.Host + "/" + dir,
				Password: remote.Secret{Env: "SLUICE_TEST_FTP_PASSWORD"}}),
			New: ftp.New,
			Put: func(t *testing.T, key string, data []byte) {
				require.NoError(t, c.Stor(path.Join(dir, key), bytes.NewReader(data)))
			},
			Exists: func(t *testing.T, key string) bool {
				_, err := c.FileSize(path.Join(dir, key))
				return err == nil
			},
		}
	})
}

// login opens a client connection for a test's own uploads and looks.
func login(t *testing.T, addr, user, pass string) *jftp.ServerConn {
	t.Helper()
	c, err := jftp.Dial(addr, jftp.DialWithTimeout(10*time.Second))
	require.NoError(t, err)
	require.NoError(t, c.Login(user, pass))
	t.Cleanup(func() { _ = c.Quit() })
	return c
}
