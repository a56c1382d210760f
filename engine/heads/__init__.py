"""Draft heads as the engine runs them: their shapes (``config``), their modules (EAGLE-3
``model``, ``peagle``, ``eagle2_model``), their formats on disk (``head_format``,
``eagle2_format``) with the checks that refuse a bad one (``validate``), and ``export``/load.

The trainer trains these modules and writes them through ``export``; speculative decoding, the
serving engine and endpoints load them from here, as vLLM and SGLang keep their EAGLE heads'
definitions beside the rest of their models.
"""
