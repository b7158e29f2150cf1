package oauth

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Lifespans of spec 5 (rules 1 and 2) and of the sign-in cookie.
const (
	DefaultAuthorizeCodeLifespan = time.Minute
	DefaultAccessTokenLifespan   = time.Hour
	DefaultLoginLifespan         = 15 * time.Minute
)

// MinSecretLen is the least length of Config.Secret, in bytes.
const MinSecretLen = 32

// Config holds the authorization server's settings.
type Config struct {
	// Issuer is the server's public base URL (https://iam.example.com): the
	// issuer in the metadata, the accounts-server value sent back with a
	// code, and the base of every endpoint. Cookies are Secure when it is
	// https.
	Issuer string
	// Location is the location value sent back with a code: the domain of
	// the data center for API calls. Default: the host of Issuer.
	Location string
	// Secret is the global secret (at least MinSecretLen bytes) the keys for
	// token HMACs and signed cookies are derived from. Changing it ends every
	// token and sign-in.
	Secret []byte

	// Lifespans; zero means the default. Tests shorten them.
	AuthorizeCodeLifespan time.Duration
	AccessTokenLifespan   time.Duration
	LoginLifespan         time.Duration

	// TokenRate limits the token and revocation endpoints per client
	// address; LoginRate limits sign-in form posts. Zero PerMinute turns a
	// limit off.
	TokenRate RateLimit
	LoginRate RateLimit
	// TrustedProxies are the proxies whose X-Forwarded-For names the client
	// address for the rate limits. Without them the peer address counts.
	TrustedProxies []netip.Prefix

	// UserStateTTL is how long a process trusts the state of a token's
	// user it read (userstate.go): a block, deactivation or demotion made
	// elsewhere reaches this process's token checks within it. Zero means
	// DefaultUserStateTTL; negative turns the cache off.
	UserStateTTL time.Duration

	// Now is the clock of sign-in, blocking and cookies; nil means time.Now.
	// (fosite checks token expiry against the wall clock: tests shorten the
	// lifespans instead.)
	Now func() time.Time
}

// RateLimit allows PerMinute requests a minute on average, in bursts of up
// to Burst.
type RateLimit struct {
	PerMinute int
	Burst     int
}

// Default rate limits, per client address.
var (
	DefaultTokenRate = RateLimit{PerMinute: 60, Burst: 20}
	DefaultLoginRate = RateLimit{PerMinute: 10, Burst: 5}
)

// withDefaults checks c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	var problems []string
	u, err := url.Parse(c.Issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		problems = append(problems, fmt.Sprintf("the issuer %q must be an absolute http or https URL without query", c.Issuer))
	} else {
		c.Issuer = strings.TrimSuffix(u.String(), "/")
		if c.Location == "" {
			c.Location = u.Hostname()
		}
	}
	if len(c.Secret) < MinSecretLen {
		problems = append(problems, fmt.Sprintf("the secret must be at least %d bytes, got %d", MinSecretLen, len(c.Secret)))
	}
	if c.AuthorizeCodeLifespan < 0 || c.AccessTokenLifespan < 0 || c.LoginLifespan < 0 {
		problems = append(problems, "lifespans must not be negative")
	}
	if c.AuthorizeCodeLifespan == 0 {
		c.AuthorizeCodeLifespan = DefaultAuthorizeCodeLifespan
	}
	if c.AccessTokenLifespan == 0 {
		c.AccessTokenLifespan = DefaultAccessTokenLifespan
	}
	if c.LoginLifespan == 0 {
		c.LoginLifespan = DefaultLoginLifespan
	}
	if c.UserStateTTL == 0 {
		c.UserStateTTL = DefaultUserStateTTL
	}
	for _, r := range []RateLimit{c.TokenRate, c.LoginRate} {
		if r.PerMinute < 0 || r.Burst < 0 {
			problems = append(problems, "rate limits must not be negative")
			break
		}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if len(problems) > 0 {
		return c, errors.New("oauth configuration: " + strings.Join(problems, "; "))
	}
	return c, nil
}

// secureCookies reports whether cookies must be sent over HTTPS only.
func (c Config) secureCookies() bool { return strings.HasPrefix(c.Issuer, "https://") }

// keys are the secrets derived from Config.Secret, one per use, so that no
// two uses share a key.
type keys struct {
	tokenHMAC []byte // fosite's global secret
	login     []byte // signs the sign-in cookie
}

func deriveKeys(secret []byte) (keys, error) {
	derive := func(use string) ([]byte, error) {
		return hkdf.Key(sha256.New, secret, nil, "iam oauth "+use, 32)
	}
	var k keys
	var err error
	if k.tokenHMAC, err = derive("token hmac"); err != nil {
		return k, fmt.Errorf("derive token key: %w", err)
	}
	if k.login, err = derive("login cookie"); err != nil {
		return k, fmt.Errorf("derive cookie key: %w", err)
	}
	return k, nil
}
