"""``veridec.reference``, the middle floor's slow side: every decoder written plainly, one full forward of the
whole canvas per step and nothing cached (LLaDA's and Dream's samplers, Fast-dLLM without cache, every parallel
rule, reward guidance, FastGuide with exact recomputation). Each decoder's rule comes from ``veridec.rules``.

It imports only the shared floor (``veridec``); ``veridec.optimized`` never imports it, nor it that.
"""
