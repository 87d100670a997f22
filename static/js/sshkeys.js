// SSH keys page: a pasted private key is removed from the field before it is ever sent or shown,
// and the page says why. The server refuses one as well (sshkeys.services, code ssh_key_private) and never echoes it.
(function () {
  "use strict";
  const field = document.querySelector('[data-testid="ssh-key-input"]');
  const notice = document.querySelector('[data-testid="ssh-key-private-local"]');
  if (!field || !notice) return;
  const PRIVATE = /PRIVATE KEY|PuTTY-User-Key-File|BEGIN SSH2 ENCRYPTED/;
  function check() {
    if (!PRIVATE.test(field.value)) return false;
    field.value = "";
    notice.hidden = false;
    field.focus();
    return true;
  }
  field.addEventListener("input", check);
  field.form.addEventListener("submit", (ev) => { if (check()) ev.preventDefault(); });
})();
