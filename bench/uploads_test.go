//go:build unix

package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"

	"github.com/grpc-respawn/respawn/internal/testpb"
)

// uploadEvery makes one call in this many of each chaos caller an Upload
// (a client stream, not idempotent, with an id of its own), where the
// strategy has one.
const uploadEvery = 8

// uploadChunk is the size of an Upload's chunks, as Velero's PutObject
// sends them.
const uploadChunk = 16 << 10

// errOtherBytes is the error of an Upload acknowledged with other bytes
// stored than were sent.
var errOtherBytes = errors.New("the plugin stored other bytes than were sent")

// uploadChunks is how many chunks the n-th call of a caller uploads: 4 to 16.
func uploadChunks(n int) int { return 4 + n%13 }

// upload uploads chunks chunks of uploadChunk bytes to c, the object named
// by id, each chunk refilled in one reused buffer as Velero does, and
// checks that the answer names the bytes sent: errOtherBytes if not.
func upload(ctx context.Context, c testpb.TestClient, id string, chunks int) error {
	buf := make([]byte, uploadChunk)
	fill := func(i int) {
		for j := range buf {
			buf[j] = byte(i*131 + j*7 + len(id))
		}
	}
	sum := sha256.New()
	for i := range chunks {
		fill(i)
		sum.Write(buf)
	}
	st, err := c.Upload(ctx)
	if err != nil {
		return err
	}
	for i := range chunks {
		fill(i)
		req := &testpb.UploadRequest{Id: id, Data: buf}
		if i == 0 {
			req.Key = id
		}
		if err := st.Send(req); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
	}
	resp, err := st.CloseAndRecv()
	if err != nil {
		return err
	}
	if resp.GetSha256() != hex.EncodeToString(sum.Sum(nil)) || resp.GetSize() != int64(chunks*uploadChunk) {
		return errOtherBytes
	}
	return nil
}
