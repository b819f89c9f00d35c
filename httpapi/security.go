package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/internal/apierr"
)

// ClientLimiter limits how fast one client may take IDs;
// internal/ratelimit's Limiter satisfies it. Allow is called once per ID
// request, on the hot path: it must be cheap and safe for concurrent use.
type ClientLimiter interface {
	// Allow reports whether the client may be served now and, if not, how
	// long until it may.
	Allow(client netip.Addr) (ok bool, retryAfter time.Duration)
}

// retryAfter is the Retry-After value of an error answered with 429 or 503.
func retryAfter(err error) string {
	var rl *apierr.RateLimitedError
	if errors.As(err, &rl) {
		return strconv.Itoa(rl.Seconds())
	}
	if noe, ok := errors.AsType[*leaf.NotOwnerError](err); ok && noe.Retry > time.Second {
		// When a server takes the tag over, in whole seconds, rounded up.
		return strconv.Itoa(int((noe.Retry + time.Second - 1) / time.Second))
	}
	return retry1s[0]
}

// wwwAuthenticate is the challenge sent with every 401 (RFC 6750).
const wwwAuthenticate = `Bearer realm="leaf"`

// limit checks the client of an ID request against the rate limiter; nil
// when it may be served. A RemoteAddr that does not parse (a handler
// embedded behind something that sets it oddly) is not limited: refusing
// every such request would be worse than serving them.
func (s *Server) limit(remoteAddr string) error {
	if s.limiter == nil {
		return nil
	}
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return nil
	}
	return s.allow(ap.Addr())
}

func (s *Server) allow(client netip.Addr) error {
	if ok, wait := s.limiter.Allow(client); !ok {
		return &apierr.RateLimitedError{Wait: wait}
	}
	return nil
}

// limited wraps a /v2 ID route with the rate limit.
func (s *Server) limited(h v2Handler) v2Handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.limit(r.RemoteAddr); err != nil {
			return err
		}
		return h(w, r)
	}
}

// checkAdmin authenticates an admin request: nil when no token is
// configured or the request carries it. Tokens are compared as SHA-256
// digests in constant time, so that neither the comparison's time nor the
// token's length leaks. Failures are not logged (a flood of them would
// flood the log); the metrics count them by route and status.
func (s *Server) checkAdmin(r *http.Request) error {
	if !s.hasToken {
		return nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return apierr.Client(apierr.ErrUnauthorized, "admin token required: send Authorization: Bearer <token>")
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return apierr.Client(apierr.ErrUnauthorized, "Authorization must be Bearer <token>")
	}
	if !s.tokenOK(token) {
		return apierr.Client(apierr.ErrUnauthorized, "invalid admin token")
	}
	return nil
}

// tokenOK reports whether token (surrounding spaces aside) is the admin
// token, compared as SHA-256 digests in constant time.
func (s *Server) tokenOK(token string) bool {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(sum[:], s.tokenHash[:]) == 1
}

// admin wraps an administration route: with a token configured, a request
// without it is answered 401 in the route's error style.
func (s *Server) admin(style errorStyle, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkAdmin(r); err != nil {
			s.writeError(w, r, style, err)
			return
		}
		h(w, r)
	}
}
