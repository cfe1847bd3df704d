package app_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/app"
)

// lockedBuffer is a log sink for a server running in this process.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestS3SourceSecretsStayNamed: an S3 source added with its keys in
// environment variables runs inside --serve and ingests; the keys are in
// none of the API's answers, the debug log, or the database files.
func TestS3SourceSecretsStayNamed(t *testing.T) {
	const ak, sk = "AKIASLUICEAPPTEST", "app-test-secret-key-do-not-leak"
	t.Setenv("SLUICE_APP_TEST_AK", ak)
	t.Setenv("SLUICE_APP_TEST_SK", sk)
	fake := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(fake.Close)
	s3c := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(fake.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, "")})
	_, err := s3c.CreateBucket(t.Context(), &awss3.CreateBucketInput{Bucket: aws.String("drops")})
	require.NoError(t, err)
	_, err = s3c.PutObject(t.Context(), &awss3.PutObjectInput{Bucket: aws.String("drops"), Key: aws.String("in/a.csv"),
		Body: strings.NewReader("sku\nA1\nA2\n")})
	require.NoError(t, err)

	c := newCLI(t)
	c.ok("source", "add", "s3", "drops", "--bucket", "drops", "--prefix", "in", "--endpoint", fake.URL, "--path-style",
		"--access-key-env", "SLUICE_APP_TEST_AK", "--secret-key-env", "SLUICE_APP_TEST_SK", "--pipeline", "noop",
		"--min-age", "100ms", "--poll", "1s")

	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	logs := &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- app.Main(ctx, []string{"--data", c.data, "--log-level", "debug", "--serve", "--addr", "127.0.0.1:0"}, pw, logs)
		pw.Close()
	}()
	defer func() {
		cancel()
		require.Equal(t, 0, <-done, logs.String())
	}()
	sc := bufio.NewScanner(pr)
	var base, link string
	for (base == "" || link == "") && sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "serving http://"); i >= 0 {
			base = strings.Fields(line[i+len("serving "):])[0]
		}
		if strings.Contains(line, "/signin?token=") {
			link = strings.TrimSpace(line)
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	require.NotEmpty(t, link, "a sign-in link")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(link)
	require.NoError(t, err)
	resp.Body.Close()
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "sluice_session" {
			session = ck
		}
	}
	require.NotNil(t, session)
	get := func(path string) string {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.AddCookie(session)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
		return string(b)
	}
	require.Eventually(t, func() bool { return strings.Contains(get("/api/sources/drops"), `"ingested":1`) },
		60*time.Second, 50*time.Millisecond, "the source runs inside --serve")
	for _, body := range []string{get("/api/sources"), get("/api/sources/drops"), logs.String()} {
		require.NotContains(t, body, sk)
		require.NotContains(t, body, ak)
	}
	require.Contains(t, logs.String(), "source object ingested", "the debug log is captured")
	require.Contains(t, get("/api/sources"), "SLUICE_APP_TEST_SK", "the variable's name is shown")
	files, err := filepath.Glob(filepath.Join(c.data, "*.db*"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.False(t, bytes.Contains(b, []byte(sk)), "%s holds the secret key", f)
	}
}
