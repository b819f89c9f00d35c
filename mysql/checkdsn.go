package mysql

// CheckDSN parses dsn as Open and OpenWorkerRegistry do, without connecting:
// it returns the error they would give for a malformed DSN or one that names
// no database (wrapping leaf.ErrInvalidArgument), nil for any other.
func CheckDSN(dsn string) error {
	_, err := config(dsn, "parse DSN")
	return err
}
