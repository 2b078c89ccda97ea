package pipetx

import "github.com/jackc/pgx/v5"

// EndRows returns rows that run end when they end (Close, or Next reporting
// no more), once, and report its error from Err: the rows of a pipelined
// batch must close the batch, and an error the server reports only at its
// end (a refused COMMIT, a deferred constraint at Sync) must not be lost.
func EndRows(rows pgx.Rows, end func() error) pgx.Rows {
	return &endRows{Rows: rows, end: end}
}

type endRows struct {
	pgx.Rows
	end    func() error
	closed bool
	err    error
}

func (r *endRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *endRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.end()
}

func (r *endRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// FirstRow is pgx.Row over the first of rows, read to their end (so their
// end's error counts); err, when set, is what Scan returns. No row is
// pgx.ErrNoRows.
func FirstRow(rows pgx.Rows, err error) pgx.Row { return firstRow{rows: rows, err: err} }

type firstRow struct {
	rows pgx.Rows
	err  error
}

func (r firstRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
