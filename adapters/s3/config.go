// Package s3 is the S3 source: objects under a prefix of a bucket, polled,
// become jobs (github.com/aws/aws-sdk-go-v2 speaks the protocol, signs the
// requests and checks the checksums a server sends). Any S3-compatible
// server works with a custom endpoint and path-style addressing. The
// listing goes a page (1,000 keys) at a time; downloads stream; the ETag
// is the version the ledger remembers. The polling, the arrival rule, the
// ledger and the backoff are adapters/remote.
package s3

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice/adapters/remote"
	"github.com/sluicehq/sluice/engine"
)

// DefaultRegion is the signing region when the config and the
// environment name none (S3-compatible servers mostly ignore it).
const DefaultRegion = "us-east-1"

// Config is an S3 source's config (SourceRecord.Config). It never holds a
// key: AccessKey and SecretKey name where they are; without them the
// SDK's default chain is used (AWS_* variables, shared files, roles).
type Config struct {
	Bucket string `json:"bucket"`
	// Prefix is the "folder" of the objects ("" = the whole bucket; a
	// missing final "/" is added).
	Prefix string `json:"prefix,omitempty"`
	// Endpoint is the server's URL (S3-compatible servers); "" = AWS.
	Endpoint string `json:"endpoint,omitempty"`
	// PathStyle addresses the bucket in the path (most compatible servers
	// need it) rather than in the host name.
	PathStyle bool   `json:"pathStyle,omitempty"`
	Region    string `json:"region,omitempty"`
	// Recursive takes the objects under sub-prefixes too (never those
	// under the done/ and failed/ prefixes).
	Recursive bool          `json:"recursive,omitempty"`
	AccessKey remote.Secret `json:"accessKey,omitzero"`
	SecretKey remote.Secret `json:"secretKey,omitzero"`
	engine.ArrivalRule
}

// ParseConfig reads and checks an S3 source's config.
func ParseConfig(raw json.RawMessage) (*Config, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, engine.Errorf(engine.EINVALID, "s3 source config: %v", err)
	}
	if c.Bucket == "" || strings.ContainsAny(c.Bucket, "/ ") {
		return nil, engine.Errorf(engine.EINVALID, "s3 source: bucket %q: want a bucket name", c.Bucket)
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, engine.Errorf(engine.EINVALID, "s3 source: endpoint %q: want http(s)://HOST[:PORT]", c.Endpoint)
		}
		if u.User != nil {
			return nil, engine.Errorf(engine.EINVALID, "s3 source: endpoint %q holds credentials: name them with --access-key-env and --secret-key-env", u.Redacted())
		}
	}
	if c.AccessKey.IsZero() != c.SecretKey.IsZero() {
		return nil, engine.Errorf(engine.EINVALID, "s3 source: name both the access key and the secret key, or neither (the default chain)")
	}
	if err := c.AccessKey.Validate("s3 access key"); err != nil {
		return nil, err
	}
	if err := c.SecretKey.Validate("s3 secret key"); err != nil {
		return nil, err
	}
	if err := c.ArrivalRule.Validate(); err != nil {
		return nil, err
	}
	c.Prefix = normPrefix(c.Prefix)
	return &c, nil
}

// normPrefix makes a prefix a "folder": "" or ending with "/".
func normPrefix(p string) string {
	p = strings.TrimPrefix(p, "/")
	if p != "" && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// Validate checks a config as ParseConfig does.
func (c *Config) Validate() error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = ParseConfig(raw)
	return err
}

// Where is the bucket and prefix as shown to people.
func (c *Config) Where() string {
	w := "s3://" + c.Bucket + "/" + normPrefix(c.Prefix)
	if c.Endpoint != "" {
		w += " at " + c.Endpoint
	}
	return w
}
