// Package inboxtype holds the small types shared by pginbox's packages (inbox,
// handler, the generated db package and generated application code): receipt IDs,
// scopes and statuses. It imports nothing else of pginbox.
package inboxtype

import (
	"crypto/rand"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/oklog/ulid/v2"
)

// ID identifies a receipt (and a claim token). It is stored in a PostgreSQL uuid
// column and encodes and scans through pgx in every query exec mode, including the
// simple protocol used behind PgBouncer, and through database/sql.
//
// ID is a ULID: 48 bits of millisecond time then 80 random bits, so IDs sort by
// creation time. The zero ID means "none".
type ID ulid.ULID

var (
	entropyMu sync.Mutex
	entropy   = ulid.Monotonic(rand.Reader, 0)
)

// New returns a fresh ID for the current time. IDs made in the same millisecond by
// this process are strictly increasing.
func New() ID {
	entropyMu.Lock()
	defer entropyMu.Unlock()
	return ID(ulid.MustNew(ulid.Timestamp(time.Now()), entropy))
}

// Parse accepts the ULID text form (26 Crockford base32 characters) or the UUID
// text form (8-4-4-4-12 hex digits, as PostgreSQL prints it).
func Parse(s string) (ID, error) {
	if len(s) == ulid.EncodedSize {
		u, err := ulid.ParseStrict(s)
		if err != nil {
			return ID{}, fmt.Errorf("inboxtype: parsing %q: %w", s, err)
		}
		return ID(u), nil
	}
	var u pgtype.UUID
	if err := u.Scan(s); err != nil || !u.Valid {
		return ID{}, fmt.Errorf("inboxtype: parsing %q: want a 26-character ULID or a UUID", s)
	}
	return ID(u.Bytes), nil
}

// IsZero reports whether id is the zero ID.
func (id ID) IsZero() bool { return id == ID{} }

// Time returns the creation time encoded in id.
func (id ID) Time() time.Time { return ulid.Time(ulid.ULID(id).Time()) }

// String returns the ULID text form.
func (id ID) String() string { return ulid.ULID(id).String() }

// UUIDString returns the form PostgreSQL prints for the uuid column.
func (id ID) UUIDString() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// MarshalText writes the ULID text form (also used by encoding/json).
func (id ID) MarshalText() ([]byte, error) { return ulid.ULID(id).MarshalText() }

// UnmarshalText accepts what Parse accepts.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// UUIDValue lets pgx encode ID as a uuid; the zero ID encodes as NULL.
func (id ID) UUIDValue() (pgtype.UUID, error) {
	return pgtype.UUID{Bytes: id, Valid: !id.IsZero()}, nil
}

// ScanUUID lets pgx scan a uuid into ID; NULL scans as the zero ID.
func (id *ID) ScanUUID(v pgtype.UUID) error {
	if !v.Valid {
		*id = ID{}
		return nil
	}
	*id = ID(v.Bytes)
	return nil
}

// Value implements driver.Valuer; pgx uses it in the simple protocol.
func (id ID) Value() (driver.Value, error) {
	if id.IsZero() {
		return nil, nil
	}
	return id.UUIDString(), nil
}

// Scan implements sql.Scanner.
func (id *ID) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*id = ID{}
		return nil
	case string:
		p, err := Parse(v)
		if err != nil {
			return err
		}
		*id = p
		return nil
	case []byte:
		if len(v) == 16 {
			copy(id[:], v)
			return nil
		}
		return id.Scan(string(v))
	case [16]byte:
		*id = ID(v)
		return nil
	}
	return fmt.Errorf("inboxtype: cannot scan %T", src)
}
