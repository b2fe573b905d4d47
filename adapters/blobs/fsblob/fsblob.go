// Package fsblob keeps blobs (SPEC §5.9) in a directory. Layout under the
// root:
//
//	blobs/<partition>/<2 hex>/<64 hex>   one file per blob
//	staging/<started ms>-<random>        uploads being written
//
// <partition> is blobio.PartitionKey of the name (lowercase base32, or a
// hash for very long names), so any partition name is one safe path
// segment; the two hex digits fan the blobs of a partition out over 256
// directories.
//
// A blob file is the bytes followed by a trailer: the blob's metadata as
// JSON (partition, id, length, media type, creation time on the app
// clock), its length as a big-endian uint32, and the magic "SYNCBLOB".
// Keeping the metadata in the one file makes publishing and deleting one
// atomic file system operation each: a process sharing the directory
// never sees bytes without metadata, or metadata whose bytes a concurrent
// Delete removed.
//
// A Put streams the body into a staging file, verifies its content
// address, appends the trailer, fsyncs, and hard-links the file to its
// final name: the link fails when the name exists, so of concurrent Puts
// of one blob (in any process) exactly one creates it and the others
// return its info. (Where hard links are unsupported it renames instead,
// replacing an identical blob.) A refused body removes its staging file;
// staging files a crash left are removed once older than
// Options.StaleUploadAfter on the app clock (Put sweeps at most hourly,
// judged by the times uploads carry). No state is held in memory, so
// several processes may share the directory.
package fsblob

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/syncd-dev/syncd/adapters/blobs/internal/blobio"
	"github.com/syncd-dev/syncd/domain/contentaddr"
	"github.com/syncd-dev/syncd/domain/syncerr"
	"github.com/syncd-dev/syncd/ports"
)

const (
	blobsDir   = "blobs"
	stagingDir = "staging"
	magic      = "SYNCBLOB"
	// tailLen is the trailer's fixed end: its length and the magic.
	tailLen = 4 + len(magic)
	// maxTrailer bounds the metadata a file may claim (a media type is
	// short; anything near this is a damaged file).
	maxTrailer = 64 << 10
	// copyBuffer is the write size of a Put.
	copyBuffer = 256 << 10
	sweepEvery = time.Hour
)

// DefaultStaleUploadAfter is how old a staging file must be before a
// sweep takes it for abandoned.
const DefaultStaleUploadAfter = 24 * time.Hour

// Options configure a Store.
type Options struct {
	// Dir is the root directory; it is created when missing.
	Dir string
	// StaleUploadAfter is the age past which a staging file is swept
	// (default DefaultStaleUploadAfter).
	StaleUploadAfter time.Duration
}

// Store is a filesystem ports.BlobStore. It is safe for concurrent use,
// also by several processes over one directory.
type Store struct {
	dir     string
	staleMs int64
	sweep   blobio.SweepGate
}

var (
	_ ports.BlobStore   = (*Store)(nil)
	_ ports.BlobBuffers = (*Store)(nil)
)

// PutBufferBytes implements ports.BlobBuffers: a Put copies through one
// buffer to the staging file.
func (s *Store) PutBufferBytes(ports.BlobUpload) int64 { return copyBuffer }

// OpenBufferBytes implements ports.BlobBuffers: a reader reads the file
// as it is consumed, with no buffer of its own.
func (s *Store) OpenBufferBytes(ports.BlobInfo, int64) int64 { return 0 }

// Open opens (creating) the store at o.Dir.
func Open(o Options) (*Store, error) {
	if o.Dir == "" {
		return nil, errors.New("fsblob: Options.Dir is required")
	}
	s := &Store{dir: o.Dir, staleMs: o.StaleUploadAfter.Milliseconds()}
	if s.staleMs <= 0 {
		s.staleMs = DefaultStaleUploadAfter.Milliseconds()
	}
	for _, d := range []string{blobsDir, stagingDir} {
		if err := os.MkdirAll(filepath.Join(o.Dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("fsblob: %w", err)
		}
	}
	return s, nil
}

func internal(op string, err error) error { return blobio.Internal("fsblob", op, err) }

// partitionDir is the directory of a partition's blobs.
func (s *Store) partitionDir(partition string) string {
	return filepath.Join(s.dir, blobsDir, blobio.PartitionKey(partition))
}

// path is the file of a blob; ok is false for a malformed id, so no
// request can name a path outside the store.
func (s *Store) path(partition, blobID string) (string, bool) {
	if !contentaddr.Valid(blobID) {
		return "", false
	}
	hex := blobio.IDHex(blobID)
	return filepath.Join(s.partitionDir(partition), hex[:2], hex), true
}

// trailer is the metadata stored at the end of a blob file.
type trailer struct {
	Partition   string `json:"partition"`
	BlobID      string `json:"blobId"`
	ByteLength  int64  `json:"byteLength"`
	MediaType   string `json:"mediaType,omitempty"`
	CreatedAtMs int64  `json:"createdAtMs"`
}

func (t trailer) info() ports.BlobInfo {
	return ports.BlobInfo{Partition: t.Partition, BlobID: t.BlobID, ByteLength: t.ByteLength,
		MediaType: t.MediaType, CreatedAtMs: t.CreatedAtMs}
}

// encodeTrailer renders the trailer that follows the bytes.
func encodeTrailer(t trailer) ([]byte, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	if len(b) > maxTrailer {
		return nil, fmt.Errorf("blob metadata of %d bytes", len(b))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(b)))
	return append(b, magic...), nil
}

// errDamaged marks a blob file whose trailer does not parse.
var errDamaged = errors.New("damaged blob file")

// readTrailer reads the metadata of an open blob file and checks it
// against the file's size.
func readTrailer(f *os.File) (trailer, error) {
	st, err := f.Stat()
	if err != nil {
		return trailer{}, err
	}
	size := st.Size()
	var tail [tailLen]byte
	if size < int64(tailLen) {
		return trailer{}, fmt.Errorf("%w %s: %d bytes", errDamaged, f.Name(), size)
	}
	if _, err := f.ReadAt(tail[:], size-int64(tailLen)); err != nil {
		return trailer{}, err
	}
	n := int64(binary.BigEndian.Uint32(tail[:4]))
	if string(tail[4:]) != magic || n > maxTrailer || n > size-int64(tailLen) {
		return trailer{}, fmt.Errorf("%w %s: no trailer", errDamaged, f.Name())
	}
	js := make([]byte, n)
	if _, err := f.ReadAt(js, size-int64(tailLen)-n); err != nil {
		return trailer{}, err
	}
	var t trailer
	if err := json.Unmarshal(js, &t); err != nil || t.ByteLength != size-int64(tailLen)-n {
		return trailer{}, fmt.Errorf("%w %s: trailer does not describe the file", errDamaged, f.Name())
	}
	return t, nil
}

// stat reads the trailer of a blob file; ok is false when there is none
// (or when it belongs to another partition or id, which only a hashed
// partition name could collide into).
func (s *Store) stat(partition, blobID string) (trailer, bool, error) {
	p, valid := s.path(partition, blobID)
	if !valid {
		return trailer{}, false, nil
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return trailer{}, false, nil
	}
	if err != nil {
		return trailer{}, false, err
	}
	defer func() { _ = f.Close() }()
	t, err := readTrailer(f)
	if err != nil {
		return trailer{}, false, err
	}
	return t, t.Partition == partition && t.BlobID == blobID, nil
}

// Put implements ports.BlobStore.
func (s *Store) Put(ctx context.Context, u ports.BlobUpload, r io.Reader) (ports.BlobInfo, bool, error) {
	if err := blobio.Check(u); err != nil {
		return ports.BlobInfo{}, false, err
	}
	if t, ok, err := s.stat(u.Partition, u.BlobID); err != nil {
		return ports.BlobInfo{}, false, internal("put", err)
	} else if ok {
		return t.info(), false, nil
	}
	s.sweepStale(u.CreatedAtMs)
	name, err := blobio.StagingName(u.CreatedAtMs)
	if err != nil {
		return ports.BlobInfo{}, false, internal("put", err)
	}
	tmp := filepath.Join(s.dir, stagingDir, name)
	defer func() { _ = os.Remove(tmp) }()
	t, err := s.write(ctx, tmp, u, r)
	if err != nil {
		return ports.BlobInfo{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return ports.BlobInfo{}, false, internal("put", err)
	}
	created, err := s.publish(tmp, u)
	if err != nil {
		return ports.BlobInfo{}, false, internal("publish", err)
	}
	if !created {
		// Another Put linked the blob first: its file is the blob.
		stored, ok, err := s.stat(u.Partition, u.BlobID)
		if err != nil || !ok {
			return ports.BlobInfo{}, false, internal("publish", errors.Join(errors.New("published blob unreadable"), err))
		}
		return stored.info(), false, nil
	}
	return t.info(), true, nil
}

// write streams a verified body and its trailer into the staging file tmp
// and makes it durable.
func (s *Store) write(ctx context.Context, tmp string, u ports.BlobUpload, r io.Reader) (trailer, error) {
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return trailer{}, internal("stage", err)
	}
	defer func() { _ = f.Close() }()
	v := blobio.NewVerifier(ctx, r, u)
	if _, err := io.CopyBuffer(struct{ io.Writer }{f}, v, make([]byte, copyBuffer)); err != nil {
		if syncerr.CodeOf(err) != "" {
			return trailer{}, err
		}
		return trailer{}, internal("write", err)
	}
	if err := v.Finish(); err != nil {
		return trailer{}, err
	}
	t := trailer{Partition: u.Partition, BlobID: u.BlobID, ByteLength: v.Count(), MediaType: u.MediaType, CreatedAtMs: u.CreatedAtMs}
	tb, err := encodeTrailer(t)
	if err != nil {
		return trailer{}, internal("write", err)
	}
	if _, err := f.Write(tb); err != nil {
		return trailer{}, internal("write", err)
	}
	if err := f.Sync(); err != nil {
		return trailer{}, internal("write", err)
	}
	if err := f.Close(); err != nil {
		return trailer{}, internal("write", err)
	}
	return t, nil
}

// publish links the finished staging file to the blob's name; created is
// false when the name already exists.
func (s *Store) publish(tmp string, u ports.BlobUpload) (bool, error) {
	final, _ := s.path(u.Partition, u.BlobID)
	dir := filepath.Dir(final)
	if err := mkdirDurable(dir); err != nil {
		return false, err
	}
	err := os.Link(tmp, final)
	switch {
	case errors.Is(err, fs.ErrExist):
		return false, nil
	case err != nil:
		// No hard links here (some network and FUSE file systems): the
		// rename replaces a concurrent twin with identical bytes.
		err = os.Rename(tmp, final)
	}
	if err != nil {
		return false, err
	}
	return true, syncDir(dir)
}

// mkdirDurable creates dir and its missing parents up to the store root,
// syncing each new directory's parent so the entries survive a crash.
func mkdirDurable(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if _, err := os.Stat(parent); err != nil {
		if err := mkdirDurable(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// sweepStale removes staging files older than StaleUploadAfter before
// nowMs (uploads of a crashed process), at most once per sweepEvery.
func (s *Store) sweepStale(nowMs int64) {
	if !s.sweep.Due(nowMs, sweepEvery.Milliseconds()) {
		return
	}
	dir := filepath.Join(s.dir, stagingDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if started, ok := blobio.StagingStarted(e.Name()); ok && started < nowMs-s.staleMs {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// Stat implements ports.BlobStore.
func (s *Store) Stat(_ context.Context, partition, blobID string) (ports.BlobInfo, bool, error) {
	t, ok, err := s.stat(partition, blobID)
	if err != nil {
		return ports.BlobInfo{}, false, internal("stat", err)
	}
	if !ok {
		return ports.BlobInfo{}, false, nil
	}
	return t.info(), true, nil
}

// blobFile reads a range of an open blob file.
type blobFile struct {
	*io.SectionReader
	f *os.File
}

func (b blobFile) Close() error { return b.f.Close() }

// Open implements ports.BlobStore. A reader keeps reading a blob deleted
// meanwhile (POSIX semantics: the open file outlives its name).
func (s *Store) Open(_ context.Context, partition, blobID string, offset, length int64) (io.ReadCloser, ports.BlobInfo, error) {
	p, valid := s.path(partition, blobID)
	if !valid {
		return nil, ports.BlobInfo{}, blobio.NotFound()
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ports.BlobInfo{}, blobio.NotFound()
	}
	if err != nil {
		return nil, ports.BlobInfo{}, internal("open", err)
	}
	t, err := readTrailer(f)
	if err == nil && (t.Partition != partition || t.BlobID != blobID) {
		_ = f.Close()
		return nil, ports.BlobInfo{}, blobio.NotFound()
	}
	if err != nil {
		_ = f.Close()
		return nil, ports.BlobInfo{}, internal("open", err)
	}
	off, n, err := blobio.Range(t.ByteLength, offset, length)
	if err != nil {
		_ = f.Close()
		return nil, ports.BlobInfo{}, err
	}
	return blobFile{SectionReader: io.NewSectionReader(f, off, n), f: f}, t.info(), nil
}

// ListCreatedBefore implements ports.BlobStore: it walks the partition's
// fan-out directories in name order (blob id order) from after, reading
// each candidate's trailer.
func (s *Store) ListCreatedBefore(_ context.Context, partition string, beforeMs int64, after string, limit int) ([]ports.BlobInfo, error) {
	if limit <= 0 {
		return nil, nil
	}
	root := s.partitionDir(partition)
	fans, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, internal("list", err)
	}
	var out []ports.BlobInfo
	for _, fan := range fans {
		// A directory holds the ids prefixed by its name: skip those
		// wholly at or before after.
		if !fan.IsDir() || contentaddr.Prefix+fan.Name()+"\xff" <= after {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(root, fan.Name()))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, internal("list", err)
		}
		for _, e := range entries {
			id := contentaddr.Prefix + e.Name()
			if !contentaddr.Valid(id) || id <= after {
				continue
			}
			t, ok, err := s.stat(partition, id)
			if err != nil {
				return nil, internal("list", err)
			}
			if !ok || t.CreatedAtMs >= beforeMs {
				continue
			}
			out = append(out, t.info())
			if len(out) == limit {
				return out, nil
			}
		}
	}
	return out, nil
}

// Delete implements ports.BlobStore: one unlink.
func (s *Store) Delete(_ context.Context, partition, blobID string) error {
	p, valid := s.path(partition, blobID)
	if !valid {
		return nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return internal("delete", err)
	}
	return nil
}
