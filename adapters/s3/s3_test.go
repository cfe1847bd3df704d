package s3_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/adapters/remote"
	"github.com/sluicehq/sluice/adapters/remote/remotetest"
	"github.com/sluicehq/sluice/adapters/s3"
	"github.com/sluicehq/sluice/engine"
)

const (
	akEnv     = "SLUICE_TEST_S3_ACCESS_KEY_INPROC"
	skEnv     = "SLUICE_TEST_S3_SECRET_KEY_INPROC"
	accessKey = "AKIASLUICETEST"
	secretKey = "sluice-s3-secret-key-never-logged"
)

// fakeS3 is an in-process S3 server (gofakes3, in memory). cutNext cuts
// the next object download short after a few bytes, as a dropped
// connection would.
type fakeS3 struct {
	url     string
	cutNext atomic.Int32
	gets    atomic.Int32
}

func startFake(t *testing.T, l net.Listener) *fakeS3 {
	t.Helper()
	f := &fakeS3{}
	h := gofakes3.New(s3mem.New()).Server()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		isGet := r.Method == http.MethodGet && strings.Count(strings.Trim(r.URL.Path, "/"), "/") >= 1
		if isGet {
			f.gets.Add(1)
		}
		if isGet && f.cutNext.Add(-1) >= 0 {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: %s\r\n\r\n", rec.Body.Len(), rec.Header().Get("ETag"))
			buf.Write(rec.Body.Bytes()[:10])
			buf.Flush()
			conn.Close()
			return
		}
		h.ServeHTTP(w, r)
	}))
	if l != nil {
		srv.Listener.Close()
		srv.Listener = l
	}
	srv.Start()
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// keys are the credentials of a server and the variables that hold them.
type keys struct{ akEnv, skEnv, ak, sk string }

// inproc are the in-process server's (it checks none).
var inproc = keys{akEnv, skEnv, accessKey, secretKey}

// client is what the tests upload with.
func client(endpoint string) *awss3.Client { return clientWith(endpoint, inproc) }

func clientWith(endpoint string, k keys) *awss3.Client {
	return awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials:                credentials.NewStaticCredentialsProvider(k.ak, k.sk, ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired, Logger: logging.Nop{}})
}

func put(t *testing.T, c *awss3.Client, bucket, key string, data []byte) {
	t.Helper()
	_, err := c.PutObject(t.Context(), &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: bytes.NewReader(data)})
	require.NoError(t, err)
}

func config(t *testing.T, c s3.Config) json.RawMessage { return configWith(t, c, inproc) }

func configWith(t *testing.T, c s3.Config, k keys) json.RawMessage {
	t.Helper()
	remotetest.SetSecret(t, k.akEnv, k.ak)
	remotetest.SetSecret(t, k.skEnv, k.sk)
	c.ArrivalRule.MinAgeMS = 200
	c.PathStyle = true
	c.AccessKey, c.SecretKey = remote.Secret{Env: k.akEnv}, remote.Secret{Env: k.skEnv}
	require.NoError(t, c.Validate())
	raw, err := json.Marshal(c)
	require.NoError(t, err)
	return raw
}

// Fixture is the suite's fixture on an S3 server at endpoint, in a
// prefix of its own of bucket.
func Fixture(t *testing.T, endpoint, bucket, prefix string, k keys) *remotetest.Fixture {
	c := clientWith(endpoint, k)
	return &remotetest.Fixture{
		Kind:   engine.SourceS3,
		Config: configWith(t, s3.Config{Bucket: bucket, Prefix: prefix, Endpoint: endpoint}, k),
		New:    s3.New,
		Put:    func(t *testing.T, key string, data []byte) { put(t, c, bucket, prefix+key, data) },
		Exists: func(t *testing.T, key string) bool {
			_, err := c.HeadObject(t.Context(), &awss3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(prefix + key)})
			return err == nil
		},
	}
}

func newBucket(t *testing.T, endpoint string) string { return newBucketWith(t, endpoint, inproc) }

func newBucketWith(t *testing.T, endpoint string, k keys) string {
	t.Helper()
	name := fmt.Sprintf("sluice-%d", time.Now().UnixNano())
	_, err := clientWith(endpoint, k).CreateBucket(t.Context(), &awss3.CreateBucketInput{Bucket: aws.String(name)})
	require.NoError(t, err)
	return name
}

func TestSuiteInProcess(t *testing.T) {
	remotetest.Run(t, func(t *testing.T) *remotetest.Fixture {
		f := startFake(t, nil)
		return Fixture(t, f.url, newBucket(t, f.url), "in/", inproc)
	})
}

func newHarness(t *testing.T, endpoint, bucket string, after string) *remotetest.Harness {
	t.Helper()
	return remotetest.NewHarness(t, &remotetest.Fixture{Kind: engine.SourceS3,
		Config: config(t, s3.Config{Bucket: bucket, Prefix: "in", Endpoint: endpoint}), New: s3.New}, after)
}

func TestServerDownAtStartIsAnErrorThenWorks(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	endpoint := "http://" + addr
	h := newHarness(t, endpoint, "late", engine.AfterMove)
	h.Start()
	require.Eventually(t, func() bool { return h.Source().LastError != "" }, remotetest.Deadline, 10*time.Millisecond)
	require.Contains(t, h.Source().LastError, "list s3://late/in/")
	require.Contains(t, h.Source().LastError, "connection refused")

	l, err = net.Listen("tcp", addr)
	require.NoError(t, err)
	f := startFake(t, l)
	_, err = client(f.url).CreateBucket(t.Context(), &awss3.CreateBucketInput{Bucket: aws.String("late")})
	require.NoError(t, err)
	put(t, client(f.url), "late", "in/a.csv", remotetest.CSV(3))
	js := h.WaitJobs(1)
	require.EqualValues(t, 3, js[0].TotalItems)
	require.Eventually(t, func() bool { return h.Source().LastError == "" }, remotetest.Deadline, 10*time.Millisecond)
}

func TestDroppedDownloadIsRetriedNotHalfIngested(t *testing.T) {
	t.Parallel()
	f := startFake(t, nil)
	bucket := newBucket(t, f.url)
	h := newHarness(t, f.url, bucket, engine.AfterLeave)
	h.Taker.RecoverAfter = time.Millisecond // one process
	put(t, client(f.url), bucket, "in/big.csv", remotetest.CSV(500))
	f.cutNext.Store(1)
	h.Start()
	js := h.WaitJobs(1)
	require.EqualValues(t, 500, js[0].TotalItems, "the whole object, once")
	require.GreaterOrEqual(t, f.gets.Load(), int32(2), "downloaded again")
	require.Contains(t, h.Log.String(), "copy interrupted")
}

func TestGarbageServerIsASourceError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		fmt.Fprint(w, "<<<\x00 not xml")
	}))
	t.Cleanup(srv.Close)
	h := newHarness(t, srv.URL, "b", engine.AfterMove)
	_, err := h.Poller().Scan(t.Context())
	require.Error(t, err)
	require.Contains(t, h.Source().LastError, "list s3://b/in/")
}

func TestHostileKeysAreNotTaken(t *testing.T) {
	t.Parallel()
	f := startFake(t, nil)
	bucket := newBucket(t, f.url)
	c := client(f.url)
	for _, k := range []string{"in/../../escape.csv", "in//abs.csv", "in/ok ünï 名前.csv", "in/sub/nested.csv"} {
		put(t, c, bucket, k, remotetest.CSV(1))
	}
	h := remotetest.NewHarness(t, &remotetest.Fixture{Kind: engine.SourceS3,
		Config: config(t, s3.Config{Bucket: bucket, Prefix: "in", Endpoint: f.url, Recursive: true}), New: s3.New}, engine.AfterMove)
	res, err := h.Poller().Scan(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, res.Ingested, "plain names, in any script, nested ones too (recursive)")
	require.Contains(t, h.Source().LastError, "unsafe name")
	names := []string{}
	for _, j := range h.Jobs() {
		names = append(names, j.Name)
	}
	require.ElementsMatch(t, []string{"ok ünï 名前.csv", "nested.csv"}, names)
	require.Contains(t, h.Source().LastError, "2 object(s)")
}

func TestReplacedObjectBetweenListAndGetIsNotMixed(t *testing.T) {
	t.Parallel()
	f := startFake(t, nil)
	bucket := newBucket(t, f.url)
	c := client(f.url)
	put(t, c, bucket, "in/a.csv", remotetest.CSV(2))
	srv, _, err := s3.NewServer(&engine.SourceRecord{Name: "x", Kind: engine.SourceS3,
		Config: config(t, s3.Config{Bucket: bucket, Prefix: "in", Endpoint: f.url})})
	require.NoError(t, err)
	var listed engine.ObjectInfo
	require.NoError(t, srv.List(t.Context(), func(i engine.ObjectInfo) error { listed = i; return nil }))
	require.Equal(t, "a.csv", listed.Key)
	require.NotEmpty(t, listed.ETag)
	put(t, c, bucket, "in/a.csv", remotetest.CSV(9))
	_, err = srv.Open(t.Context(), listed)
	require.ErrorIs(t, err, engine.ErrChanged)
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c    s3.Config
		want string
	}{
		{s3.Config{}, "want a bucket name"},
		{s3.Config{Bucket: "b", Endpoint: "ftp://x"}, "want http(s)://"},
		{s3.Config{Bucket: "b", Endpoint: "http://k:secret@x"}, "holds credentials"},
		{s3.Config{Bucket: "b", AccessKey: remote.Secret{Env: "A"}}, "name both"},
		{s3.Config{Bucket: "b", AccessKey: remote.Secret{Env: "A"}, SecretKey: remote.Secret{File: "rel"}}, "not an absolute path"},
	} {
		err := tc.c.Validate()
		require.ErrorContains(t, err, tc.want)
		require.NotContains(t, err.Error(), "secret@")
	}
	require.NoError(t, (&s3.Config{Bucket: "b", Prefix: "in", Endpoint: "http://127.0.0.1:7070", PathStyle: true}).Validate())
}
