"""What counts as a copy of a secret, and finding copies in text and bytes.

:mod:`memkit.scan.matching` defines a copy (the one matcher: every spelling of a
secret in any normal form, case, separator or escape); :mod:`memkit.scan.multi`
applies it to many secrets at once through :mod:`memkit.scan.engine` (one
Hyperscan pass, then a confirm), whose plain-letter pass (:mod:`memkit.scan.plain`,
the compiled ``_letters``) and windows around escapes (:mod:`memkit.scan.windows`)
reproduce each secret's matcher exactly; :mod:`memkit.scan.encodings` reads bytes as
UTF-16 and UTF-32 (the compiled ``_wide``).
"""

from memkit.scan.matching import (
           SecretMatcher,
           contains_secret,
           matcher,
           redact_text,
           secret_bytes_regex,
)
from memkit.scan.multi import MultiMatcher, mask_secret

__all__ = ["MultiMatcher", "SecretMatcher", "contains_secret", "mask_secret", "matcher", "redact_text",
           "secret_bytes_regex"]
