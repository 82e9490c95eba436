package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/store"
)

// checkDigest refuses what is not a digest the store could have written, as
// the directory backend does before it makes a path of one.
func checkDigest(digest string) error {
	hexPart, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hexPart) != 64 || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return fmt.Errorf("digest %q: want sha256:<64 lowercase hex>", digest)
	}
	return nil
}

// imageTimeout bounds the round trip of an image of size bytes: the
// timeout, and a second per MiB on top (minImageRate).
func (s *State) imageTimeout(size int) time.Duration {
	return s.timeout + time.Duration(size)*time.Second/minImageRate
}

// PutImage stores an image under its digest and returns the digest. The same
// bytes are stored once; a row whose bytes differ (damaged) is repaired.
func (s *State) PutImage(image []byte) (string, error) {
	digest := manifest.Digest(image)
	err := s.doWithin(context.Background(), s.imageTimeout(len(image)), true, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO berm_images (digest, image) VALUES ($1, $2)
			ON CONFLICT (digest) DO UPDATE SET image = EXCLUDED.image
			WHERE berm_images.image <> EXCLUDED.image`, digest, image)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("store image %s: %w", digest, err)
	}
	return digest, nil
}

// Image reads back the image of a digest, checking its bytes against it.
// More than manifest.DefaultMaxImage bytes is damage, not read in full.
func (s *State) Image(digest string) ([]byte, error) {
	if err := checkDigest(digest); err != nil {
		return nil, err
	}
	var image []byte
	// Its size is known once read: the bound is the largest image's.
	err := s.doWithin(context.Background(), s.imageTimeout(manifest.DefaultMaxImage), true, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT substr(image, 1, $2) FROM berm_images WHERE digest = $1`,
			digest, manifest.DefaultMaxImage+1).Scan(&image)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("image %s: %w", digest, store.ErrNoImage)
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", digest, err)
	}
	if len(image) > manifest.DefaultMaxImage {
		return nil, fmt.Errorf("image %s: over the %d bytes an image may hold: %w", digest, manifest.DefaultMaxImage, store.ErrDamaged)
	}
	if got := manifest.Digest(image); got != digest {
		return nil, fmt.Errorf("image %s: its bytes hash to %s: %w", digest, got, store.ErrDamaged)
	}
	return image, nil
}

// HasImage reports whether the database holds an image of the digest
// (unchecked); false too when it cannot be reached.
func (s *State) HasImage(digest string) bool {
	if checkDigest(digest) != nil {
		return false
	}
	var has bool
	err := s.do(context.Background(), true, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM berm_images WHERE digest = $1)`, digest).Scan(&has)
	})
	return err == nil && has
}
