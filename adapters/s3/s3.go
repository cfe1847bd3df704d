package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/sluicehq/sluice/adapters/remote"
	"github.com/sluicehq/sluice/engine"
)

// New returns the S3 source of src.
func New(src *engine.SourceRecord, taker *engine.Taker, log *slog.Logger) (*remote.Poller, error) {
	srv, cfg, err := NewServer(src)
	if err != nil {
		return nil, err
	}
	return remote.New(src, cfg.ArrivalRule, srv, taker, log), nil
}

// Server speaks to one bucket for a source (remote.Server). The client is
// made on first use (loading the default chain may read files) and kept.
type Server struct {
	cfg    *Config
	client *s3.Client
}

var _ remote.Server = (*Server)(nil)

// NewServer checks src's config and returns its server (no request made).
func NewServer(src *engine.SourceRecord) (*Server, *Config, error) {
	if src.Kind != engine.SourceS3 {
		return nil, nil, engine.Errorf(engine.EINVALID, "source %s is a %s source, not s3", src.Name, src.Kind)
	}
	cfg, err := ParseConfig(src.Config)
	if err != nil {
		return nil, nil, err
	}
	return &Server{cfg: cfg}, cfg, nil
}

// credentials reads the named keys at every refresh (a rotated key is
// picked up); the SDK caches them meanwhile.
func (s *Server) credentials(context.Context) (aws.Credentials, error) {
	ak, err := s.cfg.AccessKey.Read("s3 access key")
	if err != nil {
		return aws.Credentials{}, err
	}
	sk, err := s.cfg.SecretKey.Read("s3 secret key")
	if err != nil {
		return aws.Credentials{}, err
	}
	return aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk, Source: "sluice source config",
		CanExpire: true, Expires: time.Now().Add(5 * time.Minute)}, nil
}

// Client returns the S3 client of the source's config.
func (s *Server) Client(ctx context.Context) (*s3.Client, error) {
	if s.client != nil {
		return s.client, nil
	}
	opts := []func(*awsconfig.LoadOptions) error{
		// A server that fails is retried by the poller's backoff; the
		// SDK only smooths over a blip.
		awsconfig.WithRetryMaxAttempts(2),
		// A silent server is given up after a minute (the SDK's default
		// waits forever for response headers).
		awsconfig.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.ResponseHeaderTimeout = time.Minute
		})),
	}
	if s.cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(s.cfg.Region))
	}
	if !s.cfg.AccessKey.IsZero() {
		opts = append(opts, awsconfig.WithCredentialsProvider(aws.NewCredentialsCache(aws.CredentialsProviderFunc(s.credentials))))
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3 client: %w", err)
	}
	if ac.Region == "" {
		ac.Region = DefaultRegion
	}
	s.client = s3.NewFromConfig(ac, func(o *s3.Options) {
		if s.cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(s.cfg.Endpoint)
		}
		o.UsePathStyle = s.cfg.PathStyle
		// The SDK logs nothing: errors reach the source's log and record.
		o.Logger = logging.Nop{}
		o.ClientLogMode = 0
		// Checksums: sent only where S3 requires them (compatible servers
		// differ), checked on every download that carries one.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenSupported
	})
	return s.client, nil
}

func (s *Server) where() string { return "s3://" + s.cfg.Bucket + "/" + s.cfg.Prefix }

// skip reports whether a key (relative to the prefix) is not the source's:
// a folder marker, or under the done/ and failed/ prefixes.
func (s *Server) skip(rel string) bool {
	if rel == "" || strings.HasSuffix(rel, "/") {
		return true
	}
	first, _, nested := strings.Cut(rel, "/")
	return nested && (first == engine.DoneFolder || first == engine.FailedFolder)
}

// List lists the prefix a page at a time (only the page in memory).
func (s *Server) List(ctx context.Context, fn func(engine.ObjectInfo) error) error {
	c, err := s.Client(ctx)
	if err != nil {
		return err
	}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.cfg.Bucket), MaxKeys: aws.Int32(1000)}
	if s.cfg.Prefix != "" {
		in.Prefix = aws.String(s.cfg.Prefix)
	}
	if !s.cfg.Recursive {
		in.Delimiter = aws.String("/")
	}
	pages := s3.NewListObjectsV2Paginator(c, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list %s: %w", s.where(), err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			rel, ok := strings.CutPrefix(key, s.cfg.Prefix)
			if !ok || s.skip(rel) {
				continue
			}
			if err := fn(engine.ObjectInfo{Key: rel, Size: aws.ToInt64(o.Size), MTime: aws.ToTime(o.LastModified),
				ETag: strings.Trim(aws.ToString(o.ETag), `"`)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// errorCode is the S3 error code of err ("" when it has none).
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// Open streams the version listed (If-Match on its ETag: a replaced
// object is ErrChanged, not a mix), with the server's checksum checked
// when it sends one.
func (s *Server) Open(ctx context.Context, info engine.ObjectInfo) (io.ReadCloser, error) {
	c, err := s.Client(ctx)
	if err != nil {
		return nil, err
	}
	in := &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.cfg.Prefix + info.Key),
		ChecksumMode: types.ChecksumModeEnabled}
	if info.ETag != "" {
		in.IfMatch = aws.String(`"` + info.ETag + `"`)
	}
	out, err := c.GetObject(ctx, in)
	if err != nil {
		switch errorCode(err) {
		case "NoSuchKey", "NotFound":
			return nil, fmt.Errorf("get %s: %w", info.Key, fs.ErrNotExist)
		case "PreconditionFailed":
			return nil, fmt.Errorf("get %s: %w", info.Key, engine.ErrChanged)
		}
		return nil, fmt.Errorf("get %s: %w", info.Key, err)
	}
	if got := strings.Trim(aws.ToString(out.ETag), `"`); info.ETag != "" && got != "" && got != info.ETag {
		// A server that ignores If-Match: the same check here.
		out.Body.Close()
		return nil, fmt.Errorf("get %s: etag %s, listed %s: %w", info.Key, got, info.ETag, engine.ErrChanged)
	}
	return out.Body, nil
}

// copySource is the x-amz-copy-source of a key: bucket/key, URL-escaped.
func (s *Server) copySource(key string) string {
	return url.PathEscape(s.cfg.Bucket) + "/" + strings.ReplaceAll(url.PathEscape(key), "%2F", "/")
}

// After copies an object under done/ or failed/ (a key already there
// gets the ledger id) and deletes it, or only deletes it.
func (s *Server) After(ctx context.Context, key, action string, failed bool, id int64) error {
	c, err := s.Client(ctx)
	if err != nil {
		return err
	}
	from := s.cfg.Prefix + key
	if action == engine.AfterMove {
		dir := engine.DoneFolder
		if failed {
			dir = engine.FailedFolder
		}
		to := s.cfg.Prefix + dir + "/" + key
		if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(to)}); err == nil {
			ext := path.Ext(key)
			to = s.cfg.Prefix + dir + "/" + fmt.Sprintf("%s-%d%s", strings.TrimSuffix(key, ext), id, ext)
		}
		if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(to),
			CopySource: aws.String(s.copySource(from))}); err != nil {
			return fmt.Errorf("copy %s to %s: %w", key, to, err)
		}
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(from)}); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// Close keeps the client (HTTP connections are pooled and time out).
func (s *Server) Close() error { return nil }
