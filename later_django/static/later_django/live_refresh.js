/* later_django live refresh: the dashboard's counts, lists and charts kept current
 * without reloading the page. No dependency, no inline code (CSP: script-src 'self').
 *
 * Contract:
 * - A page opts in by marking elements with `data-later-refresh` and a stable `id`;
 *   a page without one is left alone (no control, no fetch).
 * - Every N seconds (`data-later-refresh-seconds` on this script's tag, default 5) it
 *   fetches the page's own URL with the header `X-Later-Refresh: 1`, parses the answer
 *   with DOMParser and replaces each marked element by the element with the same id in
 *   the answer. An id missing from the answer leaves the element as it was; a table
 *   scrolled sideways in a `.later-scroll` box keeps its offset.
 * - A region is not replaced while the user works in it: a form control in it has the
 *   focus, a control's value or tick differs from the one the server rendered (rows
 *   ticked for a bulk action), or text in it is selected.
 * - No fetch while the tab is hidden (Page Visibility API); one at once when it is
 *   shown again. A failed fetch doubles the wait (up to 12 intervals); a 401 or 403,
 *   or a redirect (the login page), stops the refresh until the page is loaded again.
 * - A button "Live · every N s" / "Live · paused", first in #later-dashboard, turns it
 *   off and on; the choice is kept in localStorage for every later_django page.
 */
(function () {
  "use strict";

  const script = document.currentScript;
  const STORAGE_KEY = "later_django.live_refresh";
  const MAX_BACKOFF = 12;
  const CONTROLS = "input, select, textarea";
  const SCROLLERS = ".later-scroll"; // boxes a wide table scrolls in: their offset is kept

  function start() {
    const regions = () => document.querySelectorAll("[data-later-refresh][id]");
    if (regions().length === 0) return;
    const seconds = Math.max(1, Number(script && script.dataset.laterRefreshSeconds) || 5);
    let enabled = readEnabled();
    let stopped = ""; // why the refresh ended for good, or ""
    let failures = 0;
    let timer = 0;
    let fetching = false;
    const control = document.createElement("button");

    const delay = () => seconds * 1000 * Math.min(2 ** failures, MAX_BACKOFF);

    function schedule() {
      clearTimeout(timer);
      timer = enabled && !stopped && !document.hidden ? setTimeout(refresh, delay()) : 0;
    }

    async function refresh() {
      if (fetching || !enabled || stopped || document.hidden) return;
      fetching = true;
      try {
        const response = await fetch(location.href, {
          headers: { "X-Later-Refresh": "1" },
          credentials: "same-origin",
          cache: "no-store",
        });
        if (response.redirected || response.status === 401 || response.status === 403) {
          stopped = "stopped: log in again";
        } else if (!response.ok) {
          failures += 1;
        } else {
          const html = await response.text();
          if (enabled) swap(new DOMParser().parseFromString(html, "text/html"));
          failures = 0;
        }
      } catch (error) {
        failures += 1; // offline, or the server went away: try again later
      } finally {
        fetching = false;
      }
      show();
      schedule();
    }

    function swap(fresh) {
      for (const region of regions()) {
        const replacement = fresh.getElementById(region.id);
        if (!replacement || inUse(region)) continue;
        const scrolled = Array.from(region.querySelectorAll(SCROLLERS), scrollOf);
        region.replaceWith(document.adoptNode(replacement));
        replacement.querySelectorAll(SCROLLERS).forEach((box, n) => {
          if (scrolled[n]) box.scrollTo(scrolled[n]);
        });
      }
    }

    function show() {
      let state = `every ${seconds} s`;
      if (stopped) state = stopped;
      else if (!enabled) state = "paused";
      else if (failures) state = `error, next try in ${Math.round(delay() / 1000)} s`;
      control.textContent = `Live · ${state}`;
      control.setAttribute("aria-pressed", String(enabled && !stopped));
      control.disabled = Boolean(stopped);
    }

    control.type = "button";
    control.className = "later-live";
    control.title = "Refresh the figures on this page every few seconds";
    control.addEventListener("click", () => {
      enabled = !enabled;
      failures = 0;
      writeEnabled(enabled);
      show();
      if (enabled) refresh();
      else schedule();
    });
    (document.getElementById("later-dashboard") || document.body).prepend(control);
    document.addEventListener("visibilitychange", () => (document.hidden ? schedule() : refresh()));
    show();
    schedule();
  }

  function scrollOf(box) {
    return { left: box.scrollLeft, top: box.scrollTop };
  }

  /* The user is working in `region`: refreshing it would take that away. */
  function inUse(region) {
    const focused = document.activeElement;
    if (focused && region.contains(focused) && focused.matches(`${CONTROLS}, button`)) return true;
    const selection = window.getSelection();
    if (selection && !selection.isCollapsed && region.contains(selection.anchorNode)) return true;
    return Array.from(region.querySelectorAll(CONTROLS)).some(changedByUser);
  }

  function changedByUser(control) {
    if (control.type === "checkbox" || control.type === "radio") {
      return control.checked !== control.defaultChecked;
    }
    if (control.tagName === "SELECT") {
      const options = Array.from(control.options);
      if (!control.multiple && !options.some((item) => item.defaultSelected)) {
        return control.selectedIndex > 0; // none marked: the first option is the default
      }
      return options.some((item) => item.selected !== item.defaultSelected);
    }
    return control.value !== control.defaultValue;
  }

  function readEnabled() {
    try {
      return window.localStorage.getItem(STORAGE_KEY) !== "off";
    } catch (error) {
      return true; // storage blocked: live, as by default
    }
  }

  function writeEnabled(enabled) {
    try {
      window.localStorage.setItem(STORAGE_KEY, enabled ? "on" : "off");
    } catch (error) {
      // storage blocked: the choice lasts until the page is left
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
