package tiered

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Options configure an S3-compatible store.
type S3Options struct {
	// Endpoint is host[:port] or an http:// or https:// URL; empty means
	// AWS S3 in Region.
	Endpoint string
	// Region is the bucket's region (us-east-1 when empty and the AWS
	// variables name none).
	Region string
	Bucket string
	// Prefix is prepended to every key (no leading or trailing slash).
	Prefix string
	// PathStyle addresses the bucket in the path (bucket.host
	// otherwise), as most S3-compatible servers need.
	PathStyle bool
	// CAFile is a PEM file of the CAs the endpoint's certificate is
	// checked against (the system's when empty).
	CAFile string
}

// S3Store is a Store in an S3-compatible bucket, over minio-go. The
// credentials are the usual AWS ones: AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, then the shared credentials
// file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, profile
// AWS_PROFILE), then the instance's IAM role. minio-go retries a request
// that failed with a 5xx answer, throttling (SlowDown, 503) or a broken
// connection, with exponential backoff and jitter, up to ten times; a Put
// reads its body again from the start for each try. An object appears
// whole or not at all (S3's PUT and multipart completion are atomic).
type S3Store struct {
	client *minio.Client
	opts   S3Options
}

// NewS3Store returns the store. It does not reach the endpoint: Check
// does.
func NewS3Store(opts S3Options) (*S3Store, error) {
	endpoint, secure := opts.Endpoint, true
	if endpoint == "" {
		endpoint = "s3.amazonaws.com"
		if opts.Region != "" && opts.Region != "us-east-1" {
			endpoint = "s3." + opts.Region + ".amazonaws.com"
		}
	} else if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("S3 endpoint %q: expected host:port or an http:// or https:// URL", opts.Endpoint)
		}
		endpoint, secure = u.Host, u.Scheme == "https"
	}
	if opts.Region == "" {
		opts.Region = os.Getenv("AWS_REGION")
	}
	if opts.Region == "" {
		opts.Region = os.Getenv("AWS_DEFAULT_REGION")
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{},
		&credentials.IAM{Client: &http.Client{Transport: http.DefaultTransport, Timeout: 5 * time.Second}},
	})
	transport, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the S3 endpoint's CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the S3 endpoint's CA file %s holds no PEM certificate", opts.CAFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	lookup := minio.BucketLookupAuto
	if opts.PathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(endpoint, &minio.Options{Creds: creds, Secure: secure, Region: opts.Region, BucketLookup: lookup, Transport: transport})
	if err != nil {
		return nil, fmt.Errorf("S3 endpoint %s: %w", endpoint, err)
	}
	opts.Prefix = strings.Trim(opts.Prefix, "/")
	return &S3Store{client: client, opts: opts}, nil
}

func (s *S3Store) String() string {
	return "s3://" + path.Join(s.opts.Bucket, s.opts.Prefix) + " at " + s.client.EndpointURL().String()
}

// Check reaches the bucket: a clear error when it is missing or cannot be
// reached (the broker serves on and logs it; copies are retried).
func (s *S3Store) Check(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.opts.Bucket)
	if err != nil {
		return fmt.Errorf("reaching bucket %s at %s: %w", s.opts.Bucket, s.client.EndpointURL(), err)
	}
	if !ok {
		return fmt.Errorf("bucket %s does not exist at %s: create it, Gregor does not", s.opts.Bucket, s.client.EndpointURL())
	}
	return nil
}

func (s *S3Store) key(key string) string {
	if s.opts.Prefix == "" {
		return key
	}
	return s.opts.Prefix + "/" + key
}

func (s *S3Store) Put(ctx context.Context, key string, body io.ReaderAt, size int64) error {
	_, err := s.client.PutObject(ctx, s.opts.Bucket, s.key(key), io.NewSectionReader(body, 0, size), size,
		minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return fmt.Errorf("putting %s in %s: %w", key, s, err)
	}
	return nil
}

func (s *S3Store) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	var opts minio.GetObjectOptions
	switch {
	case n == 0:
		return nil, nil
	case n > 0:
		if err := opts.SetRange(off, off+n-1); err != nil {
			return nil, err
		}
	case off > 0:
		if err := opts.SetRange(off, 0); err != nil {
			return nil, err
		}
	}
	obj, err := s.client.GetObject(ctx, s.opts.Bucket, s.key(key), opts)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(obj)
		obj.Close()
		if err == nil {
			return b, nil
		}
	}
	switch minio.ToErrorResponse(err).Code {
	case minio.NoSuchKey:
		return nil, fmt.Errorf("%s in %s: %w", key, s, ErrNotFound)
	case minio.InvalidRange:
		return nil, nil // past the end
	}
	return nil, fmt.Errorf("reading %s in %s: %w", key, s, err)
}

func (s *S3Store) Delete(ctx context.Context, key string) error {
	err := s.client.RemoveObject(ctx, s.opts.Bucket, s.key(key), minio.RemoveObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).Code != minio.NoSuchKey {
		return fmt.Errorf("deleting %s in %s: %w", key, s, err)
	}
	return nil
}

func (s *S3Store) List(ctx context.Context, dir string) ([]string, error) {
	prefix := s.key(strings.TrimSuffix(dir, "/")) + "/"
	var keys []string
	for obj := range s.client.ListObjects(ctx, s.opts.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: false}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("listing %s in %s: %w", dir, s, obj.Err)
		}
		name := strings.TrimPrefix(obj.Key, prefix)
		if name == "" || strings.HasSuffix(name, "/") {
			continue
		}
		keys = append(keys, name)
	}
	return keys, nil
}

var _ Store = (*S3Store)(nil)
