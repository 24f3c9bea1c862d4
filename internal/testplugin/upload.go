package testplugin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-respawn/respawn/internal/ledgerwire"
	"github.com/grpc-respawn/respawn/internal/testpb"
)

// ObjectSuffix names the directory where Upload stores its objects: the
// journal's path plus ObjectSuffix.
const ObjectSuffix = ".objects"

// Object is an object Upload stored.
type Object struct {
	CallID string // the ledger id of the upload that stored it (ledger.CallID)
	Digest uint32 // CRC-32C of the upload's messages, each encoded again with proto
	Length int64  // their total length
	Size   int64  // the object's bytes
	SHA256 string // hex
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Upload receives an object in chunks, the first naming its key, and
// stores it once the client closes its side (see StoredObject), then
// journals the first message's id: the journal counts stores. InUpload,
// if set, is called with the number of chunks received after each.
func (s *Server) Upload(stream grpc.ClientStreamingServer[testpb.UploadRequest, testpb.UploadResponse]) error {
	ctx := stream.Context()
	var first *testpb.UploadRequest
	var o Object
	var data []byte
	for chunks := 1; ; chunks++ {
		req, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if first == nil {
			first = req
		}
		b, err := proto.Marshal(req) // the bytes the host's proto codec sent
		if err != nil {
			return status.Errorf(codes.Internal, "encode: %v", err)
		}
		o.Digest = crc32.Update(o.Digest, castagnoli, b)
		o.Length += int64(len(b))
		data = append(data, req.GetData()...)
		if s.InUpload != nil {
			s.InUpload(chunks)
		}
		if err := sleep(ctx, req.GetDelayMs()); err != nil {
			return err
		}
	}
	if first == nil {
		return status.Error(codes.InvalidArgument, "upload: no message")
	}
	sum := sha256.Sum256(data)
	o.CallID, o.Size, o.SHA256 = first.GetId(), int64(len(data)), hex.EncodeToString(sum[:])
	if v := metadata.ValueFromIncomingContext(ctx, ledgerwire.IDKey); len(v) > 0 {
		o.CallID = v[0] // as ledger.CallID gives it
	}
	if err := s.store(first.GetKey(), o, data); err != nil {
		return status.Errorf(codes.Internal, "store: %v", err)
	}
	if err := s.recordCall(ctx, first.GetId()); err != nil {
		return status.Errorf(codes.Internal, "journal: %v", err)
	}
	return stream.SendAndClose(&testpb.UploadResponse{Pid: s.pid, Id: first.GetId(), Key: first.GetKey(), Size: o.Size, Sha256: o.SHA256})
}

// store writes the object o of key, whole or not at all: a temporary file
// renamed over the key's.
func (s *Server) store(key string, o Object, data []byte) error {
	if s.journal == "" {
		return nil
	}
	dir := s.journal + ObjectSuffix
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	head := fmt.Sprintf("%s %08x %d %d %s\n", o.CallID, o.Digest, o.Length, o.Size, o.SHA256)
	if _, err := f.Write(append([]byte(head), data...)); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, hex.EncodeToString([]byte(key))))
}

// StoredObject returns the object Upload stored under key with the journal
// at journal, and whether there is one.
func StoredObject(journal, key string) (Object, bool, error) {
	b, err := os.ReadFile(filepath.Join(journal+ObjectSuffix, hex.EncodeToString([]byte(key))))
	if os.IsNotExist(err) {
		return Object{}, false, nil
	}
	if err != nil {
		return Object{}, false, err
	}
	head, _, _ := strings.Cut(string(b), "\n")
	var o Object
	if _, err := fmt.Sscanf(head, "%s %08x %d %d %s", &o.CallID, &o.Digest, &o.Length, &o.Size, &o.SHA256); err != nil {
		return Object{}, false, fmt.Errorf("object %q: %v", key, err)
	}
	return o, true, nil
}
