package s3_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/remote/remotetest"
)

// TestSuiteRealServer runs the suite against a real S3-compatible server
// that checks signatures (versitygw in CI): SLUICE_TEST_S3 is its URL,
// SLUICE_TEST_S3_ACCESS_KEY and SLUICE_TEST_S3_SECRET_KEY its keys. One
// bucket, a prefix per test.
func TestSuiteRealServer(t *testing.T) {
	env := remotetest.RealServer(t, "an S3 server", "SLUICE_TEST_S3", "SLUICE_TEST_S3_ACCESS_KEY", "SLUICE_TEST_S3_SECRET_KEY")
	k := keys{"SLUICE_TEST_S3_ACCESS_KEY", "SLUICE_TEST_S3_SECRET_KEY", env[1], env[2]}
	bucket := newBucketWith(t, env[0], k)
	remotetest.Run(t, func(t *testing.T) *remotetest.Fixture {
		return Fixture(t, env[0], bucket, fmt.Sprintf("t%d/", time.Now().UnixNano()), k)
	})
}
