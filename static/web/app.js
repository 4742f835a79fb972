// Charts wider than a phone scroll sideways: open them at "now", their right edge, after
// the page loads and after each live refresh swaps a new one in.
function chartsAtNow(root) {
  (root || document).querySelectorAll(".chart-wrap").forEach(function (wrap) {
    wrap.scrollLeft = wrap.scrollWidth;
  });
}
document.addEventListener("DOMContentLoaded", function () { chartsAtNow(); });
document.addEventListener("htmx:afterSwap", function (event) { chartsAtNow(event.target); });
