package fakes3_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/syncd-dev/syncd/test/fakes3"
)

// The server is an oracle of the SigV4 signature, not a sink that takes
// anything: the SDK's requests pass with the server's credentials and
// are refused with any other secret, key or region.
func TestTheServerChecksSignatures(t *testing.T) {
	srv := fakes3.Start(t)
	bucket := srv.Bucket(t, "b")
	client := func(key, secret, region string) *s3.Client {
		return s3.New(s3.Options{
			BaseEndpoint: aws.String(srv.URL), Region: region, UsePathStyle: true, RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""),
		})
	}
	put := func(c *s3.Client) error {
		_, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("k"), Body: bytes.NewReader([]byte("v"))})
		return err
	}
	if err := put(client(fakes3.AccessKeyID, fakes3.SecretAccessKey, fakes3.Region)); err != nil {
		t.Fatalf("a request signed with the server's credentials: %v", err)
	}
	for _, tc := range []struct {
		name, key, secret, region, code string
	}{
		{"another secret", fakes3.AccessKeyID, "wrong", fakes3.Region, "SignatureDoesNotMatch"},
		{"another access key", "someone-else", fakes3.SecretAccessKey, fakes3.Region, "InvalidAccessKeyId"},
		{"another region", fakes3.AccessKeyID, fakes3.SecretAccessKey, "eu-west-1", "SignatureDoesNotMatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.Refused()
			var api smithy.APIError
			if err := put(client(tc.key, tc.secret, tc.region)); !errors.As(err, &api) || api.ErrorCode() != tc.code {
				t.Fatalf("PutObject: %v, want %s", err, tc.code)
			}
			if srv.Refused() != before+1 {
				t.Fatalf("refused %d requests, want %d", srv.Refused(), before+1)
			}
		})
	}
}
