// Charts wider than a phone scroll sideways: open them at "now", their right edge, after
// the page loads and after each live refresh swaps a new one in.
function chartsAtNow(root) {
  (root || document).querySelectorAll(".chart-wrap").forEach(function (wrap) {
    wrap.scrollLeft = wrap.scrollWidth;
    labelsInView(wrap);
    wrap.addEventListener("scroll", function () { labelsInView(wrap); }, { passive: true });
  });
}

// A label the scrolled view cuts in half reads as a stray letter ("n" of "−40 min"): only
// labels wholly in view are shown.
function labelsInView(wrap) {
  var view = wrap.getBoundingClientRect();
  wrap.querySelectorAll("svg text").forEach(function (label) {
    label.style.visibility = "";
    var box = label.getBoundingClientRect();
    var cut = box.left < view.left - 0.5 || box.right > view.right + 0.5;
    label.style.visibility = cut ? "hidden" : "";
  });
}
document.addEventListener("DOMContentLoaded", function () { chartsAtNow(); });
document.addEventListener("htmx:afterSwap", function (event) { chartsAtNow(event.target); });
