package ftp_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ftpserver "github.com/fclairamb/ftpserverlib"
	"github.com/spf13/afero"
	"github.com/stretchr/testify/require"
)

const (
	testUser = "sluice"
	testPass = "s3cr3t-ftp-pa55word"
)

// driver is an in-process FTP server (ftpserverlib) serving one folder to
// one user. breakNext cuts the next download short: the file reads fail
// after a few bytes, as a dropped connection would.
type driver struct {
	dir       string
	addr      string
	noMLSD    bool
	cert      *tls.Certificate
	breakNext atomic.Int32
	retrieved atomic.Int32
}

func (d *driver) GetSettings() (*ftpserver.Settings, error) {
	return &ftpserver.Settings{ListenAddr: d.addr, DefaultTransferType: ftpserver.TransferTypeBinary,
		DisableMLSD: d.noMLSD, DisableMLST: d.noMLSD}, nil
}

func (d *driver) ClientConnected(ftpserver.ClientContext) (string, error) {
	return "sluice test server", nil
}
func (d *driver) ClientDisconnected(ftpserver.ClientContext) {}

// GetTLSConfig serves a self-signed certificate when the test asked for
// TLS (explicit FTPS).
func (d *driver) GetTLSConfig() (*tls.Config, error) {
	if d.cert == nil {
		return nil, errors.New("no TLS")
	}
	return &tls.Config{Certificates: []tls.Certificate{*d.cert}, MinVersion: tls.VersionTLS12}, nil
}

// selfSigned makes a certificate for 127.0.0.1.
func selfSigned(t *testing.T) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (d *driver) AuthUser(_ ftpserver.ClientContext, user, pass string) (ftpserver.ClientDriver, error) {
	if user != testUser || pass != testPass {
		return nil, errors.New("bad credentials")
	}
	return &flakyFs{Fs: afero.NewBasePathFs(afero.NewOsFs(), d.dir), d: d}, nil
}

// flakyFs breaks downloads on demand.
type flakyFs struct {
	afero.Fs
	d *driver
}

func (f *flakyFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	file, err := f.Fs.OpenFile(name, flag, perm)
	if err != nil || flag != os.O_RDONLY {
		return file, err
	}
	if fi, serr := file.Stat(); serr == nil && fi.IsDir() {
		return file, nil
	}
	f.d.retrieved.Add(1)
	if f.d.breakNext.Add(-1) >= 0 {
		return &brokenFile{File: file}, nil
	}
	return file, nil
}

// brokenFile fails after its first bytes.
type brokenFile struct {
	afero.File
	n int
}

func (b *brokenFile) Read(p []byte) (int, error) {
	if b.n > 0 {
		return 0, errors.New("disk pulled out")
	}
	n, _ := b.File.Read(p[:min(len(p), 5)])
	b.n += n
	return n, nil
}

// server runs an FTP server on addr ("127.0.0.1:0": any port) serving dir.
type server struct {
	*driver
	srv  *ftpserver.FtpServer
	wg   sync.WaitGroup
	once sync.Once
}

func startServer(t *testing.T, addr, dir string, noMLSD bool) *server {
	return startDriver(t, &driver{dir: dir, addr: addr, noMLSD: noMLSD})
}

func startDriver(t *testing.T, d *driver) *server {
	t.Helper()
	s := &server{driver: d, srv: ftpserver.NewFtpServer(d)}
	s.srv.Logger = slog.New(slog.DiscardHandler)
	require.NoError(t, s.srv.Listen())
	d.addr = s.srv.Addr()
	s.wg.Go(func() { _ = s.srv.Serve() })
	t.Cleanup(s.stop)
	return s
}

func (s *server) stop() {
	s.once.Do(func() { _ = s.srv.Stop(); s.wg.Wait() })
}

// freeAddr returns an address nobody listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

var _ io.Reader = (*brokenFile)(nil)
