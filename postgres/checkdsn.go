package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leafgo/leaf"
)

// CheckDSN parses dsn as Open does, without connecting: it returns an error
// wrapping leaf.ErrInvalidArgument for a DSN pgx cannot parse.
func CheckDSN(dsn string) error {
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return fmt.Errorf("postgres: parse DSN: %w: %w", leaf.ErrInvalidArgument, err)
	}
	return nil
}
