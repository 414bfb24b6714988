package sweep

import (
	"regexp"
	"strings"

	"github.com/specsweep/specsweep/internal/argparse"
)

// The one rule of what a spec holds that is a secret (the orchestrator redacts it from everything
// a sweep stores, the report from the command it recommends): every env value but settings, and
// the literal values of SGLang's credential options.

// Redacted stands for a secret's value wherever it is shown.
const Redacted = "<redacted>"

// CredentialFlags are SGLang's options whose values are credentials: a literal value given to one
// is a secret like an env value (a `${NAME}` reference names an env variable instead).
var CredentialFlags = []string{argparse.APIKey, argparse.AdminAPIKey, argparse.HFToken, argparse.SSLKeyfilePassword}

// MinSecret: values shorter than this are settings (a "1", "on"), not credentials; replacing them
// would blank every such character run in a log line and make it unreadable.
const MinSecret = 4

// plainSetting matches values that are numbers or booleans: settings, never credentials, and
// replacing them would rewrite every number in a log line.
var plainSetting = regexp.MustCompile(`^(?i:[-+]?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|true|false|yes|no|on|off|none|null)$`)

// IsSecret reports whether a value (an env value, or a credential option's) is taken for a secret:
// not short, not a number or boolean, not a `${NAME}` reference. Leading and trailing space is not
// part of it.
func IsSecret(v string) bool {
	v = strings.TrimSpace(v)
	return len(v) >= MinSecret && !plainSetting.MatchString(v) && !strings.HasPrefix(v, "${")
}
