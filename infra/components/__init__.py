"""One construct per capability; the stack only composes them."""
